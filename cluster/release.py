"""This build's release: logged when a node starts, so a rolling upgrade shows which nodes run what.

Releases are tagged ``v0.N`` with an entry in the CHANGELOG that names the tagged commit (the
rolling-upgrade test starts the previous release from it). A release reads every format the
previous one wrote, and writes nothing the previous one cannot read until every node has
registered that it reads it (``cluster.metadata_log``): nodes are upgraded one at a time.
"""

RELEASE = "0.2.0.dev0"
