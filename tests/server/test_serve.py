"""`spanfill serve` caps oneDNN's per-shape caches before torch loads, unless the user set them."""
from spanfill.server import serve


def test_native_caches_are_capped_unless_already_set():
    env = {"LRU_CACHE_CAPACITY": "1024"}
    serve.bound_native_caches(env)
    assert env == {"LRU_CACHE_CAPACITY": "1024", "ONEDNN_PRIMITIVE_CACHE_CAPACITY": "64"}
