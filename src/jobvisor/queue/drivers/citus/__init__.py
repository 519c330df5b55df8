"""The Citus driver: PostgreSQL's, with the jobs table spread over a cluster
by bucket (docs/design.md, "Scale-out")."""
