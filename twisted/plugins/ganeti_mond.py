# Imported by every twistd plugin scan: keep it to one lazy line.
from twisted.application.service import ServiceMaker

ganetiMond = ServiceMaker("Ganeti MonD", "ganeti.mond.tap", "Ganeti's monitoring daemon (reports and metrics)", "ganeti-mond")
