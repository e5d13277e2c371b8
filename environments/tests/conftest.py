# Makes envlib (environments/tests) and recipecheck (spack-repo) importable for these tests.
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "spack-repo"))
