"""Stand-alone tools (Ganeti's C{/usr/lib/ganeti/tools})."""
