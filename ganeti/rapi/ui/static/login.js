"use strict";
// The login page's only script: show why the last attempt failed.
if (new URLSearchParams(location.search).has("failed")) {
  document.getElementById("failed").classList.remove("hidden");
}
