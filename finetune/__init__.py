"""ETAI finetune."""
