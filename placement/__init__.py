"""placement: Kafka-exact replica placers, manual assignments, broker pools, consumer assignors
and balance metrics. Pure: no IO, no clock, no hidden randomness (random sources are passed in).
"""
