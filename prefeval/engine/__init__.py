"""Layer 4: computing preferences through one interface (:mod:`.job`), locally
(:mod:`.local`) or with Dask (:mod:`.dask`), the engine chosen in one place
(:mod:`.engines`), and the cache of reduced runs and computed cubes (:mod:`.cache`)."""
