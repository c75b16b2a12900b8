"""What several engines share: the executor channel, the warm pool, names and
labels, fork copies, option rules, the settings every backend reads.

Engine-neutral on purpose: nothing here imports an engine's client library.
"""
