"""Which sample when: shuffles, partitions and stream mixing (the streaming issue fills this in)."""
