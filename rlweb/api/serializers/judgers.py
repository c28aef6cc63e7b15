from rest_framework import serializers

from rlweb.judgers.models import JudgerConfig


class JudgerSerializer(serializers.ModelSerializer):
    owner = serializers.CharField(source="owner.username", read_only=True)

    class Meta:
        model = JudgerConfig
        fields = ["id", "name", "description", "kind", "params", "ray_actors", "owner", "created_at", "updated_at"]
        read_only_fields = fields
