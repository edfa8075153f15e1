# Imported by every twistd plugin scan: keep it to one lazy line.
from twisted.application.service import ServiceMaker

ganetiRapi = ServiceMaker("Ganeti RAPI", "ganeti.rapi.tap", "Ganeti's remote API (HTTPS REST)", "ganeti-rapi")
