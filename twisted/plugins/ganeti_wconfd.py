# Imported by every twistd plugin scan: keep it to one lazy line.
from twisted.application.service import ServiceMaker

ganetiWConfd = ServiceMaker("Ganeti WConfD", "ganeti.wconfd.tap", "Ganeti's configuration and lock daemon", "ganeti-wconfd")
