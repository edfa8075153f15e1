# Imported by every twistd plugin scan: keep it to one lazy line.
from twisted.application.service import ServiceMaker

ganetiConfd = ServiceMaker("Ganeti RConfD", "ganeti.confd.tap", "Ganeti's UDP configuration query daemon", "ganeti-confd")
