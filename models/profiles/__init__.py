"""Hardware profiles as YAML data (see sanlab.models.core.profile)."""
