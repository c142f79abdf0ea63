"""The package's version: the project's (CMakeLists.txt `project(sluice VERSION ...)`).

tests/python/test_version.py checks that the two agree, and that the installed wheel says the same.
"""

__version__ = "0.1.0"
