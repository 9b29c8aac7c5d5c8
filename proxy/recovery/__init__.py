"""Recovery: a refusal that got through, read (rules.providers.refusals), repaired once and
retried (retry.py); what recovered it is learned for the client's next requests (learned.py)."""
