"""ganeti-rapi: Ganeti's remote REST API (version 2) over HTTPS, forwarded to LuxiD."""
