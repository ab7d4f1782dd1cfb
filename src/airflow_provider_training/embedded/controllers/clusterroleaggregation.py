"""ClusterRole aggregation (kube-controller-manager's ``clusterrole-aggregation`` controller): every
ClusterRole with an ``aggregationRule`` holds the rules of the ClusterRoles its selectors match
(``embedded/rbac/aggregation.py``), so ``admin`` / ``edit`` / ``view`` and the Kubeflow roles gain
what a newly applied ``aggregate-to-*`` role grants, and lose what a deleted one granted.

Any ClusterRole write recomputes them all in one pass (there are a dozen; ``view`` aggregates into
``edit`` which aggregates into ``admin``, so a pass repeats until nothing changes).
"""

from __future__ import annotations

from airflow_provider_training.embedded.rbac.aggregation import aggregated_rules
from airflow_provider_training.embedded.runtime import ControllerContext, Watches
from airflow_provider_training.embedded.runtime.controller import Key, run
from airflow_provider_training.specs.refs import ObjectRef
from airflow_provider_training.specs.resources import CLUSTER_ROLES

ALL = ObjectRef("ClusterRole", "", "")  # the one key: all aggregated roles are recomputed together
MAX_ROUNDS = 10  # chains of aggregation are short; a cycle settles in two rounds


class ClusterRoleAggregation:
    name = "clusterrole-aggregation"
    sources = (Watches(CLUSTER_ROLES.key, lambda event: [ALL]),)

    async def run(self, ctx: ControllerContext) -> None:
        self.store = ctx.store
        await run(self, ctx)

    def reconcile(self, key: Key) -> float | None:
        for _ in range(MAX_ROUNDS):
            roles = self.store.list(CLUSTER_ROLES.key).items
            changed = False
            for role in roles:
                if not (role.get("aggregationRule") or {}).get("clusterRoleSelectors"):
                    continue
                rules = aggregated_rules(role, roles)
                if role.get("rules") != rules:
                    role["rules"] = rules
                    role.update(self.store.update(CLUSTER_ROLES.key, role))
                    changed = True
            if not changed:
                return None
        return None
