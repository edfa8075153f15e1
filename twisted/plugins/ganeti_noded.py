# Imported by every twistd plugin scan: keep it to one lazy line.
from twisted.application.service import ServiceMaker

ganetiNoded = ServiceMaker("Ganeti NodeD", "ganeti.noded.tap", "Ganeti's node daemon (node RPC over mutual TLS)", "ganeti-noded")
