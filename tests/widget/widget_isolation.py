"""What each widget test starts with (tests/widget/conftest.py), so that nothing an earlier test
in the same process left behind reaches its views."""
import gc


def forget_earlier_tests() -> None:
    """Collect what earlier tests in this process left in reference cycles before a test builds
    a view. The "me" lane lists every live pointer of the process, not only the test's: an
    earlier test's pointers in a cycle would be listed, then released whenever the cyclic GC
    happens to run, perhaps in the middle of this test's action, adding their rows' removal to
    the patch it counts (10 ops where 2 were meant). A full collection also starts the GC's
    counters from zero, so the test's own garbage is collected at the same points in any order."""
    gc.collect()
