"""Hardware profiles as YAML data (see sanlab.models.profile)."""
