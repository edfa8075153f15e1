import sys

from ganeti.jobs.process import main

sys.exit(main())
