"use strict";
// A small terminal for an instance's serial console: our own code, no third-party library.
// It keeps a screen of lines with a cursor and understands what a Linux serial console
// sends in practice: CR, LF, BS, TAB, UTF-8, and the ANSI escapes for cursor moves and
// erasing (others, colours included, are read and ignored).  Text is always set as text.
// Typing goes through a hidden textarea (so phones show their keyboard); special keys
// are sent as a VT100 terminal sends them.

class GanetiTerminal {
  constructor(holder, send, rows = 24, cols = 80, scrollback = 1000) {
    this.rows = rows; this.cols = cols; this.scrollback = scrollback; this.send = send;
    this.lines = [""]; this.row = 0; this.col = 0;   // row: index in lines
    this.esc = null;                                  // an escape sequence being read
    this.decoder = new TextDecoder("utf-8");
    this.screen = document.createElement("pre");
    this.screen.className = "terminal"; this.screen.id = "terminal";
    this.input = document.createElement("textarea");
    this.input.className = "terminal-input"; this.input.id = "terminal-input";
    this.input.setAttribute("autocapitalize", "off"); this.input.setAttribute("autocomplete", "off");
    this.input.setAttribute("spellcheck", "false"); this.input.setAttribute("aria-label", "console input");
    holder.append(this.screen, this.input);
    this.screen.addEventListener("click", () => this.input.focus());
    this.input.addEventListener("input", () => {
      if (this.input.value) this.send(this.input.value.replace(/\r?\n/g, "\r"));
      this.input.value = "";
    });
    this.input.addEventListener("keydown", (e) => this.key(e));
    this.pending = false;
    this.draw();
  }

  key(e) {
    const keys = {Enter: "\r", Backspace: "\x7f", Tab: "\t", Escape: "\x1b", ArrowUp: "\x1b[A",
                  ArrowDown: "\x1b[B", ArrowRight: "\x1b[C", ArrowLeft: "\x1b[D", Home: "\x1b[H",
                  End: "\x1b[F", Delete: "\x1b[3~", PageUp: "\x1b[5~", PageDown: "\x1b[6~"};
    let out = null;
    if (e.ctrlKey && !e.altKey && !e.metaKey && e.key.length === 1) {
      const c = e.key.toUpperCase().charCodeAt(0);
      if (c >= 64 && c <= 95) out = String.fromCharCode(c - 64);       // Ctrl-A .. Ctrl-_
    } else if (!e.metaKey && keys[e.key] !== undefined) {
      out = keys[e.key];
    }
    if (out !== null) { e.preventDefault(); this.send(out); }
  }

  // bytes (an ArrayBuffer) or text from the console
  write(data) {
    const text = typeof data === "string" ? data : this.decoder.decode(new Uint8Array(data), {stream: true});
    for (const ch of text) this.put(ch);
    if (!this.pending) { this.pending = true; requestAnimationFrame(() => { this.pending = false; this.draw(); }); }
  }

  put(ch) {
    if (this.esc !== null) return this.escape(ch);
    switch (ch) {
      case "\x1b": this.esc = ""; return;
      case "\r": this.col = 0; return;
      case "\n": this.newline(); return;
      case "\b": this.col = Math.max(0, this.col - 1); return;
      case "\t": this.col = Math.min(this.cols - 1, (Math.floor(this.col / 8) + 1) * 8); return;
      case "\x07": case "\x00": case "\x0e": case "\x0f": return;
    }
    if (ch < " " || ch === "\x7f") return;
    if (this.col >= this.cols) { this.newline(); this.col = 0; }
    const line = this.lines[this.row].padEnd(this.col, " ");
    this.lines[this.row] = line.slice(0, this.col) + ch + line.slice(this.col + 1);
    this.col += 1;
  }

  newline() {
    this.row += 1;
    if (this.row === this.lines.length) this.lines.push("");
    if (this.lines.length > this.scrollback) {
      const drop = this.lines.length - this.scrollback;
      this.lines.splice(0, drop); this.row -= drop;
    }
  }

  // the first row of the visible screen (cursor addressing is relative to it)
  top() { return Math.max(0, this.lines.length - this.rows); }

  escape(ch) {
    const seq = this.esc + ch;
    if (seq === "[" || seq === "(" || seq === ")" || (seq.startsWith("[") && /^[0-9;?]$/.test(ch))) {
      this.esc = seq; return;
    }
    this.esc = null;
    if (!seq.startsWith("[")) return;                   // ESC c, ESC 7, ESC ( B ...: ignored
    const final = ch, args = seq.slice(1, -1).replace("?", "").split(";").map((n) => parseInt(n, 10));
    const n = isNaN(args[0]) || args[0] === 0 ? 1 : args[0];
    const line = () => this.lines[this.row].padEnd(this.col, " ");
    switch (final) {
      case "A": this.row = Math.max(this.top(), this.row - n); break;
      case "B": this.row = Math.min(this.lines.length - 1, this.row + n); break;
      case "C": this.col = Math.min(this.cols - 1, this.col + n); break;
      case "D": this.col = Math.max(0, this.col - n); break;
      case "G": this.col = Math.min(this.cols - 1, n - 1); break;
      case "H": case "f": {
        const r = isNaN(args[0]) ? 1 : Math.max(1, args[0]), c = isNaN(args[1]) ? 1 : Math.max(1, args[1]);
        while (this.lines.length < this.top() + this.rows && this.lines.length < this.rows) this.lines.push("");
        this.row = Math.min(this.lines.length - 1, this.top() + r - 1); this.col = Math.min(this.cols - 1, c - 1);
        break;
      }
      case "K": {
        const mode = isNaN(args[0]) ? 0 : args[0], l = line();
        this.lines[this.row] = mode === 0 ? l.slice(0, this.col) : mode === 1 ? " ".repeat(this.col) + l.slice(this.col) : "";
        break;
      }
      case "J": {
        const mode = isNaN(args[0]) ? 0 : args[0];
        if (mode === 2 || mode === 3) {
          const top = this.top();
          for (let r = top; r < this.lines.length; r++) this.lines[r] = "";
        } else if (mode === 0) {
          this.lines[this.row] = line().slice(0, this.col);
          this.lines.length = this.row + 1;
        }
        break;
      }
      default: break;                                   // m (colours), h/l (modes), r, ...: ignored
    }
  }

  text() { return this.lines.join("\n"); }

  draw() {
    const before = this.lines.slice(0, this.row).concat([this.lines[this.row].slice(0, this.col)]).join("\n");
    const at = this.lines[this.row].charAt(this.col) || " ";
    const after = this.lines[this.row].slice(this.col + 1) + (this.row < this.lines.length - 1 ? "\n" : "") +
                  this.lines.slice(this.row + 1).join("\n");
    const cursor = document.createElement("span");
    cursor.className = "cursor"; cursor.textContent = at;
    this.screen.replaceChildren(document.createTextNode(before), cursor, document.createTextNode(after));
    this.screen.scrollTop = this.screen.scrollHeight;
  }
}
window.GanetiTerminal = GanetiTerminal;
