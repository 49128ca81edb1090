"""Authentication and authorization (issue 17): SCRAM so far (``scram``)."""
