"""The drivers: the only code of jobvisor that imports psycopg or sqlite3.

Each engine's package holds its runners (which drive a `plan.Plan` on a
connection), its dialect (values in and out), its SQL, its notifications and
the wrapping of its errors as jobvisor's. `borrowed` runs plans on a
connection an application owns; `shared` holds what both engines decode alike.
Nothing here imports `queue.ops`: operations reach a driver only as plans.
"""
