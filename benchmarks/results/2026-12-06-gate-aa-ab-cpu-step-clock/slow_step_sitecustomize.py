import time
from graphbench.runner import engine as _e
_orig = _e.Engine.step
def _slow(self, *a, **k):
    time.sleep(0.0003)
    return _orig(self, *a, **k)
_e.Engine.step = _slow
