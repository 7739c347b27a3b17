import sys

from pykbatch.commands import main

sys.exit(main())
