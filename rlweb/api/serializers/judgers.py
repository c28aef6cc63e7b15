from rest_framework import serializers

from rlweb.judgers.models import JudgerConfig


class JudgerSerializer(serializers.ModelSerializer):
    owner = serializers.CharField(source="owner.username", read_only=True)
    params = serializers.SerializerMethodField(
        help_text="The kind's parameters, shown as the judger page shows them: http header values read '••• set', "
        "a URL's password and query values '•••'."
    )

    class Meta:
        model = JudgerConfig
        fields = ["id", "name", "description", "kind", "params", "ray_actors", "owner", "created_at", "updated_at"]
        read_only_fields = fields

    def get_params(self, judger) -> dict:
        from rlweb.judgers.forms import _mask_headers, _public_url

        params = _mask_headers(judger.params or {})
        if isinstance(params.get("url"), str):
            params["url"] = _public_url(params["url"])
        return params
