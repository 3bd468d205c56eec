"""Layer 4: computing preferences, locally (:mod:`.local`) or with Dask (:mod:`.dask`),
and the cache of computed cubes (:mod:`.cache`)."""
