"""HTTP served by ferry's long-running processes below the API: the `/metrics` + `/healthz`
server `ferry run` and `ferry monitor` both use."""
