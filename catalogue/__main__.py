"""``python -m catalogue [CHAPTER...]``: print the catalogue's figures (:mod:`catalogue.figures`)."""

import sys

from catalogue.figures import main

sys.exit(main())
