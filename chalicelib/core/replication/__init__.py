"""Table replication (S3 Tables' replication): each replicated table's versions copied, in order
and with every path rewritten, to its destination table buckets as read-only replicas
(replicate.py), by the dispatcher's pass. It uses the catalog facade and the operator's path
rewriting (core/admin/relocate.py); only the dispatcher's handler and the tests import it
(`.importlinter`, "The core's parts")."""
