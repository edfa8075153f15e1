# Imported by every twistd plugin scan: keep it to one lazy line.
from twisted.application.service import ServiceMaker

ganetiLuxid = ServiceMaker("Ganeti LuxiD", "ganeti.luxid.tap", "Ganeti's LUXI server and job queue", "ganeti-luxid")
