"""Runs Python unittest tests so that ctest tells a skip from a pass.

Exit status: 0 when every test ran and passed; 1 on a failure or an error; SKIPPED (77) when
nothing failed but a test was skipped (a missing tool, a missing model). ctest shows 77 as
"Skipped" when the test has SKIP_RETURN_CODE 77 (every Python test in tests/*/CMakeLists.txt
does), never as "Passed".

  /usr/bin/python3 -m tests.unittest_exit tools.train.test_cot [unittest args]
  or, in a test module: tests.unittest_exit.main()  (its own tests, sys.argv's args)
"""
import sys
import unittest

SKIPPED = 77


def main(argv=None, module="__main__"):
    program = unittest.main(module=module, argv=argv, exit=False, verbosity=2)
    result = program.result
    if not result.wasSuccessful():
        sys.exit(1)
    if result.skipped:
        for test, reason in result.skipped:
            print("SKIPPED %s: %s" % (test.id(), reason), file=sys.stderr)
        sys.exit(SKIPPED)
    sys.exit(0)


if __name__ == "__main__":
    main(argv=[sys.argv[0]] + sys.argv[1:], module=None)
