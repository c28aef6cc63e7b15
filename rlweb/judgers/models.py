from django.db import models

from rlweb.core.ownership import Owned


class JudgerConfig(Owned):
    """A reward function configuration. `kind` + `params` are validated by the engine's own
    pydantic schema (workers.rl.judgers.spec), the single source of truth."""

    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    kind = models.CharField(max_length=40, db_index=True)
    params = models.JSONField(default=dict, blank=True)
    ray_actors = models.PositiveSmallIntegerField(default=0, help_text="0 = judge in the trainer process")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["owner", "name"], name="judger_unique_name_per_owner")]

    def __str__(self):
        return f"{self.name} ({self.kind})"
