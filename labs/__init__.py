"""Lab lifecycle: the topology model, runtimes that deploy it, and the state they leave."""
