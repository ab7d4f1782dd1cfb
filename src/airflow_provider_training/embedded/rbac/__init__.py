"""Role-based access control as kube-apiserver does it (``plugin/pkg/auth/authorizer/rbac``,
``pkg/registry/rbac``): who a request is (``user``), what rules grant (``rules``), which rules
apply to whom (``index``, built from the stored Roles, ClusterRoles and their bindings), what an
RBAC object may hold (``validation``), whether a writer may grant it (``escalation``), the default
policy a cluster starts with (``bootstrap``) and ClusterRole aggregation (``aggregation``).

The API server calls the authorizer once per request; the aggregation controller and the API
server's admission share the rest. Nothing here does I/O but read the store.
"""
