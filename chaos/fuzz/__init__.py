"""A wire fuzzer: valid requests for every served API and version (built with kio), mutated,
sent to a live cluster while a healthy client group keeps working (``kcoord chaos fuzz``)."""
