from kbroker.broker.transactions.producer_ids import ProducerIdManager


def test_ids_are_never_reissued_across_restarts(tmp_path):
    first = ProducerIdManager(str(tmp_path), block_size=10)
    issued = [first.generate() for _ in range(13)]
    assert issued == list(range(13))
    # A crash here loses the rest of the block; the next process starts past it.
    second = ProducerIdManager(str(tmp_path), block_size=10)
    assert second.generate() == 20
