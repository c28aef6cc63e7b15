from rest_framework import serializers

from rlweb.judgers.models import JudgerConfig


class JudgerSerializer(serializers.ModelSerializer):
    owner = serializers.CharField(source="owner.username", read_only=True)
    params = serializers.SerializerMethodField(help_text="The kind's parameters; http header values read '••• set'.")

    class Meta:
        model = JudgerConfig
        fields = ["id", "name", "description", "kind", "params", "ray_actors", "owner", "created_at", "updated_at"]
        read_only_fields = fields

    def get_params(self, judger) -> dict:
        from rlweb.judgers.forms import _mask_headers

        return _mask_headers(judger.params or {})
