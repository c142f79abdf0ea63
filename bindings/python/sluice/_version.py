"""The package's version: the project's (CMakeLists.txt `project(sluice VERSION ...)`).

tests/integration/test_python_client.sh checks that the two agree, and that the installed wheel's
metadata and file name say the same.
"""

__version__ = "0.1.0"
