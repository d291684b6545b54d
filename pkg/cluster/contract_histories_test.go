package cluster

// Random histories, the generators of TestSafetyContract and
// FuzzSafetyContract: a history drawn from bytes, and the weights of the
// events it is made of.

// eventTable weighs the kinds of random histories: one byte picks one of
// its entries.
var eventTable = [32]eventKind{
	evTick, evTick, evTick, evTick,
	evKubelet, evKubelet, evKubelet, evKubelet, evKubelet,
	evCrash, evCrash, evCrash,
	evRecover, evRecover,
	evPodFails, evPodFails,
	evPodDeleted, evPodDeleted,
	evPodsGone, evPodsGone,
	evNodeLost, evNodeBack, evDataRefused, evPartition, evUnreachable,
	evOperatorRestart, evOperatorRestart,
	evStatusStore, evSpecSize, evSpecVersion, evAllPodsDeleted, evAddReplyLost,
}
