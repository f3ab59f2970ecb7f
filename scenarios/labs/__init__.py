"""The labs a student works through, and the judge that checks them.

Each lab is a scenario (``NAME.yaml``) with its exercises (``NAME.checks.yaml``):
steps that run a command on a host, read a capture or compare an answer.
The judge lives beside the files it reads: ``exercises.py`` loads and checks
them, ``answers.py`` compares an answer with the key, and ``checking.py``
walks an exercise's steps and says what is done and what comes next.  Only
the command line (``sanlab lab check``) calls it.
"""
