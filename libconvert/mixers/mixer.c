/* mixer.c — the mixer registry (mixer.h): cfg.mixer → its unit. */
#include "mixer.h"

const struct hm_mixer_unit *hm_mixer_unit(enum hm_mixer mixer)
{
    switch (mixer) {
    case HM_MIXER_SOFTMAX: return &hm_mixer_softmax;
    case HM_MIXER_HEDGEHOG: return &hm_mixer_hedgehog;
    case HM_MIXER_HEDGEMAMBA: return &hm_mixer_hedgemamba;
    default: return NULL;
    }
}
