"""The k8s site: its site, launcher, transport and checks together."""
