import sys

from pykbatch.cli import main

sys.exit(main())
