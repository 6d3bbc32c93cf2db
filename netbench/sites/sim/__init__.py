"""The sim site: its site, launcher, transport and checks together."""
