package pykbatch.tests.registry;

import io.apicurio.common.apps.config.DynamicConfigPropertyList;
import javax.enterprise.context.ApplicationScoped;
import javax.enterprise.inject.Produces;

/** The bean apicurio-common-app-components-config-index would record at build time: the
 *  registry's runtime-editable settings.  None here: the tests configure it at start. */
@ApplicationScoped
public class DynamicSettings {
    @Produces
    @ApplicationScoped
    public DynamicConfigPropertyList dynamicConfigProperties() {
        return new DynamicConfigPropertyList(java.util.List.of());
    }
}
