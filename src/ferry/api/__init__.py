"""`ferry run --api-port`: a REST API to change replication while it runs (FastAPI).

`app.py` the endpoints, `auth.py` the bearer token, `views.py` what a flow looks like as JSON,
`server.py` serving it (uvicorn, TLS) from `ferry run`, `client.py` the CLI's side.
"""
