"""Admin, cluster and security APIs at every advertised version, raw and via admin clients."""
