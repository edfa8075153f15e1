"""The web console served by C{ganeti-rapi} at C{/ui/} (see docs/webui.md).

L{sessions} (pure): signed session cookies, CSRF tokens, the login throttle;
L{resource}: the C{/ui/} paths (pages, login, the RAPI resources under
C{/ui/api/}); L{events}: the server-sent event streams; C{static/}: the
hand-written page, style sheet and script, served from the installed package.
"""
